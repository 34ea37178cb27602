"""The artifact's own files as this project defines them: the manifest, its signature, the golden vector, and a
loader of the compiled graphs for tests and benchmarks. Imports base, model and text."""
