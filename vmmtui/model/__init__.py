"""The model of programs vmmtui did not start: what their events say is true, with no words and
no observer. ``findings`` (the kinds of verdict, what proves each, the one count) and ``ends``
(how a process ended, computed once). Renderers word them where they draw."""
