import pytest

from vmmtui.stream.sizes import SizeError, align_up, format_size, parse_size


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1048576", 1048576),
        ("1MiB", 1 << 20),
        ("64MB", 64_000_000),
        ("2GiB", 2 << 30),
        ("4k", 4096),
        (" 3 KiB ", 3072),
        ("1.5GiB", 3 << 29),
        (4096, 4096),
    ],
)
def test_parse_size_accepts_user_forms(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "garbage", "1XB", "", "0MiB", -5, "1..2MiB"])
def test_parse_size_rejects_bad_sizes_with_one_line(text):
    with pytest.raises(SizeError) as err:
        parse_size(text)
    assert "\n" not in str(err.value)


def test_align_up_rounds_to_granularity():
    assert align_up(1 << 20, 2 << 20) == 2 << 20
    assert align_up(2 << 20, 2 << 20) == 2 << 20
    assert align_up(1, 4096) == 4096


def test_format_size():
    assert format_size(2 << 20) == "2 MiB"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(12) == "12 B"
