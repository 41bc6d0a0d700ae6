// Package kbuild builds kernels for the labs: it keeps one checkout per
// build slot in step with a git tree by rewriting only the files that
// differ, configures the lab's kernel from a base plus the project's
// fragments and verifies them, runs make with ccache inside a bubblewrap
// sandbox, and keeps the artifacts in a store keyed by tree, config and
// toolchain so a kernel is never built twice.
package kbuild
