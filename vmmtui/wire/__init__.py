"""The wires between vmmtui's own processes: the producer-consumer socket that carries the fd
(``channel``) and the control channel between the session and each worker (``protocol``)."""
