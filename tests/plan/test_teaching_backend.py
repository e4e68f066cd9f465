"""The teaching text names the backend the session runs: on cuda no sentence about memfd's stand-in."""

from vmmtui.plan.steps import LEGACY_STEPS, PIDFD_STEPS, POOL_STEPS, STEPS, teaching_for


def test_on_cuda_no_step_teaches_the_memfd_backend_and_on_memfd_every_sentence_stays():
    texts = [s.teaching for d in (STEPS, PIDFD_STEPS, POOL_STEPS, LEGACY_STEPS) for s in d.values()]
    with_memfd = [t for t in texts if "memfd" in t]
    assert with_memfd  # the plan teaches both backends in one text
    for t in texts:
        cuda = teaching_for(t, "cuda")
        assert "memfd" not in cuda, cuda
        assert cuda and t.startswith(cuda.rstrip("."))
        assert teaching_for(t, "memfd") == t
