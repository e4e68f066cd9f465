"""Look at programs vmmtui did not start: /proc scans, kcmp-sorted shares, fd lifecycles, NVML,
preflight, leaks and ``watch`` of a command's process tree.
No Textual here. ``follow.Follower`` is the engine: ``poll()`` returns typed events and is callable
from any thread that owns the follower."""
