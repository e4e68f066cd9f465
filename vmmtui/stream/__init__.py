"""The one event stream: typed events (a session's, ``events``; an observed program's, ``observed``),
the worker state carried inside them (``state``) and their JSON (``codec``). Every source writes it,
every model and renderer reads it; nothing here imports a source or a renderer."""
