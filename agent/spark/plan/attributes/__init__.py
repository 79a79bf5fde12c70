"""Where each attribute of a plan comes from: the walk of operators (`operators`, `kinds`,
`shaping`), column lineage through attribute ids (`columns`), the types of computed columns
(`typeinfer`) and the lineage of Delta's row-level commands (`dml`). Imports `plan.syntax`
only."""
