"""The front end of graph mode: tracing Python into the IR (`tracer`, `call_trace`,
`autograph*`), and the compiled-call machinery around it (cache, retrace reasons, dynamic
shapes, compiled optimizer steps, saved-graph files). May import every other room."""
