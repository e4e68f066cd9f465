"""Measurements, never asserted in tests: ``run`` (vmmtui bench: every path against the device's
copy ceiling), ``report`` (tables and the SVG plot), ``staged`` (the host-staged copy it is
compared with) and ``soak`` (many sessions in a row: nothing may grow)."""
