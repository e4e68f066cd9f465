"""The pipeline of a run: a source (eBPF, polling, a recording) feeds the model of observed
programs (the ledger, its findings, the refcount book) and its sinks (the recording, the
exporters, a renderer). Above the sources (`trace/`) and the world (`model/`), below the apps."""
