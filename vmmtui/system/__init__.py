"""This host and this process: what the host can run (``host``, ``doctor``), the stop signals
(``interrupts``) and our output after one (``output``), dying with our parent (``lifeline``) and
each process's fd table as the kernel shows it (``fdtable``)."""
