"""The commit this source tree was made from, written into the tree itself: `git archive`
substitutes it below (.gitattributes: export-subst), and the images' build writes the
`GIT_COMMIT` build argument here (Dockerfile.cuda, Dockerfile.rocm). In a git checkout it
stays a placeholder and artifact.env asks git instead."""

COMMIT = "$Format:%H$"
