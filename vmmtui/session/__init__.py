"""Drive worker processes through a plan and say, in typed events, what the kernel saw.

``loop`` is the step loop and close; ``processes`` talks to each worker; ``fdchecks`` reads /proc
and asks kcmp; ``tmpdir`` owns the private socket directory; ``stage`` is what scenario hooks may do.
"""

from vmmtui.session.loop import ConfigError, Session, SessionError

__all__ = ["ConfigError", "Session", "SessionError"]
