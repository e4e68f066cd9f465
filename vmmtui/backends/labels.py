"""Each backend's label, apart from its class so that a worker can say hello before it imports
its backend (numpy, cuda.bindings): the classes take theirs from this table."""

LABELS = {
    "cuda": "cuda (GPU memory through the CUDA VMM driver API)",
    "memfd": "memfd (CPU memory, the analogue of XPMEM make/get/attach; not GPU memory)",
}

#: what --backend accepts (here, not in the package, so that the command line's parser needs no backend)
NAMES = ("auto", *LABELS)
