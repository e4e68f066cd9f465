"""vmmtui: watch CUDA VMM inter-process memory sharing happen, one step at a time."""

__version__ = "0.1.0"
