"""``vmmtui trace``: the calls that share memory between programs vmmtui did not start, captured in
the kernel with eBPF (libbpf through ctypes), folded into a ledger. Importing this package loads
nothing: the loader opens libbpf only when a trace starts."""
