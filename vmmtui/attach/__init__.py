"""Look at programs vmmtui did not start: /proc scans, kcmp-sorted shares, fd lifecycles, NVML,
preflight, leaks, ``watch`` of a command's process tree, and the board a view renders (``board``).
No Textual here. ``follow.Follower`` is the engine: ``poll()`` returns typed events and is callable
from any thread that owns the follower."""
