"""The compile: pick attention kernels and linear forms, export the graphs, AOTInductor-compile them for a
target, and write the artifact. Imports base, model, text and artifact; never the importers."""
