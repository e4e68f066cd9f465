"""The verdict as an assertion: ``api.py`` (``vmmtui.tracing``: a block of the caller's process
and the processes it starts, traced through the one pipeline, its findings with their words and
a recording) and ``plugin.py`` (the pytest plugin that fails a test on them). A consumer of the
pipeline and the words, as the commands are; nothing below imports it."""
