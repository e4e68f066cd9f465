"""The sources of a trace: the calls that share memory between programs vmmtui did not start,
captured in the kernel with eBPF (libbpf through ctypes) or polled from /proc; the pipeline
(``vmmtui/pipeline/``) folds them. Importing this package loads nothing: the loader opens libbpf
only when a trace starts."""
