"""Words, written once: the wording of every session event (``narration``), every failure's cause and
fix (``troubleshooting``), the status line's first words (``status``), byte sizes (``sizes``) and the one sanitiser for text from outside
(``names``). Renderers call these; the model never does."""
