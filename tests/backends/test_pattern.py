import numpy as np

from vmmtui.backends import pattern as pat


def test_pattern_matches_the_seed_formula_in_c_arithmetic():
    for i in (0, 1, 2, 1000, 262143, 2**31 - 1, 2**31 + 5):
        expected = ((i * 2 + 1337) & 0xFFFFFFFF) ^ 0xDEADBEEF
        assert int(pat.pattern(i, 1)[0]) == expected


def test_pattern_chunks_agree_with_one_shot():
    whole = pat.pattern(0, 5000)
    assert np.array_equal(np.concatenate([pat.pattern(0, 1234), pat.pattern(1234, 3766)]), whole)


def test_verify_finds_first_mismatch_across_chunks(monkeypatch):
    monkeypatch.setattr(pat, "CHUNK", 1000)
    data = pat.pattern(0, 4321)
    data[2500] ^= 1
    data[4320] = 7
    result = pat.verify_chunks(len(data), lambda s, n: data[s : s + n])
    assert not result.passed
    assert result.mismatches == 2
    assert (result.first_index, result.first_got) == (2500, int(data[2500]))
    assert result.first_expected == int(pat.pattern(2500, 1)[0])
    assert "index 2500" in result.describe()


def test_verify_passes_on_the_pattern():
    data = pat.pattern(0, 777)
    result = pat.verify_chunks(777, lambda s, n: data[s : s + n])
    assert result.passed and result.checked == 777
    assert result.describe() == "Data verification PASSED (777 integers verified)"
