"""An artifact's own files as this project defines them: the manifest, its signature and the keys, the
golden vector, and a loader of the compiled graphs for tests and benchmarks. May import base/, model/ and
text/."""
