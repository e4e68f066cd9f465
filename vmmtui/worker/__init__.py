"""A worker process: one role (producer or consumer) running its steps on the session's command.

``python -m vmmtui.worker`` (``__main__``) is the process; ``core.Worker`` the role's state and step
dispatch; ``producer``/``consumer`` the step bodies; ``sharing`` VMM or legacy IPC behind one
interface; ``fdbook`` the fds it declares; ``reaper`` what removes an orphaned producer's socket.
Nothing heavy is imported here, so that the entry point can fork its reaper before numpy or the
driver start threads.
"""
