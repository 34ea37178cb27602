"""The compile: pick attention kernels and linear forms, export the graphs, AOTInductor-compile them for a
target, and write the artifact. May import base/, model/, text/ and artifact/; importers/ is its
sibling."""
