// Package docscheck holds the test that keeps the documents true to the
// tree: every environment variable, repository path and Go package that
// README.md, PRIVACY.md, ARCHITECTURE.md or the OpenAPI document names must
// exist, so a rename or a removal that forgets a document fails CI instead
// of misleading the next reader. It has no code of its own.
package docscheck
