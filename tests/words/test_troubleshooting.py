"""Every failure code the code can raise has a cause and a fix; some depend on the call."""

import re
from pathlib import Path

from vmmtui.stream.failures import failure
from vmmtui.words.troubleshooting import TABLE, explain, worded


def test_every_code_raised_in_the_package_is_explained():
    src = "\n".join(
        p.read_text() for p in (Path(__file__).resolve().parents[2] / "vmmtui").rglob("*.py")
    )
    raised = set(re.findall(r'failure\("([A-Z_]+)"', src))
    assert raised and raised <= set(TABLE), raised - set(TABLE)


def test_same_code_different_call_different_explanation():
    export = failure("CUDA_ERROR_INVALID_VALUE", "cuMemExportToShareableHandle")
    create = failure("CUDA_ERROR_INVALID_VALUE", "cuMemCreate")
    assert "requestedHandleTypes" in worded(export)[0] and "granularity" in worded(create)[0]
    assert "cuMemRelease" in explain("CUDA_ERROR_INVALID_VALUE", "cuMemFree")[1]
    assert explain("NO_SUCH_CODE") == (
        "unexpected error",
        "see the message; report it if it persists",
    )


def test_a_failure_is_a_fact_worded_where_it_is_drawn():
    """A failure carries no sentence of ours through events and recordings: its cause and fix
    come from today's tables when it is drawn."""
    f = failure("CUDA_ERROR_OUT_OF_MEMORY", "cuMemCreate", "out of memory")
    assert (f.cause, f.fix) == ("", "")
    assert f.one_line() == "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
    assert worded(f) == explain("CUDA_ERROR_OUT_OF_MEMORY", "cuMemCreate")


def test_an_old_recording_s_words_are_kept_only_for_a_code_today_s_tables_do_not_know():
    from vmmtui.stream.failures import Failure

    old_known = Failure("CUDA_ERROR_OUT_OF_MEMORY", "cuMemCreate", "x", "old cause", "old fix")
    assert worded(old_known) == explain("CUDA_ERROR_OUT_OF_MEMORY", "cuMemCreate")
    old_unknown = Failure("SOME_OLD_CODE", "step", "x", "its cause then", "its fix then")
    assert worded(old_unknown) == ("its cause then", "its fix then")
    assert worded(Failure("SOME_OLD_CODE", "step", "x")) == explain("SOME_OLD_CODE")
