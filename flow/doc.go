// Package flow holds what crosses the pipeline's stages, so that every
// stage and the engine name it alike: the verdict (one typed Outcome
// from the comparison that decides it to the database that keeps it and
// the reply that says it), the series and what its diff changes, the
// boot and the sample it measured, the decision and the report, and the
// error that says a failure is the infrastructure's (MarkInfra). It
// imports no other package of the project.
package flow
