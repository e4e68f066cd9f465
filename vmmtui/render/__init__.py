"""Renderers of the event stream outside the terminal app: the console of ``vmmtui run``
(``console``), transcripts (``transcript``), the self-contained replay page (``page``) and
Perfetto's JSON (``perfetto``)."""
