// Package docscheck holds the docs to the code. Its tests fail when a
// package's doc.go file map leaves out a file of the package or names one
// that is gone, when code or docs cite a section of docs/design.md that
// does not exist, when a constant the docs quote has another value
// in the code, when an answer code design.md lists has another status or is
// missing, when the README's layout table leaves out a package, or when
// docs/benchmarks.md's RAM figures are not the generated report's. Docs
// drift silently; these checks make the drift a failing test.
//
// It has no code of its own: only tests, which read the repository's files.
//
//	doc.go          this comment
//	filemap_test.go doc.go file maps against each package's files
//	sections_test.go cited design.md sections against its headings
//	consts_test.go  quoted constants and codes against the code
//	layout_test.go  the README's layout table against the package directories
//	figures_test.go benchmarks.md's RAM figures against docs/bench/report.md
//	eval_test.go    a small evaluator of the repository's constant declarations
//	repo_test.go    finding and walking the repository
package docscheck
