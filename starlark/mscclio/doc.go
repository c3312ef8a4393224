// Package mscclio is the glue between a kernbench run and MSCCL XML
// (engine/msccl holds the format itself): its one job is to turn a
// schedule into a run and a run into a schedule. Importing, it gives the
// runner kernel (msccl_runner.star) its keyword arguments, checks the
// schedule against the run's flags and sizes, chooses the rings' depth
// and places the rings and staging where they fit; exporting
// (--export-msccl), it records a run's data movement call by call and
// writes it as a schedule.
//
// The dependency points one way: starlark/ccl imports this package, which
// knows nothing of ccl's plan, bench or reports. It takes plain inputs
// (the schedule, the configuration, a run's sizes and buffers) and
// returns plain values and errors of type *Error that carry their kind;
// ccl loads the file, runs the runner through its own bench and turns
// those errors into its failures. The one thing of ccl's it needs, how to
// name the user's --set items in a hint, comes through the small Items
// interface.
package mscclio
