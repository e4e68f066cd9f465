"""`vmmtui doctor`: what this machine can run and why not, asked of every layer (the backends,
the tracer's loader, this host), so it sits above them all."""
