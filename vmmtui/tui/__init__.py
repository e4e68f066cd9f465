"""The Textual inspector: the app, its widgets, screens and messages (the only place that imports textual)."""
