"""Stage 1, the ranks: what every process under torchrun does (docs/design.md section 2).
The CLI process's side is artifact.launch; neither package imports the other."""
