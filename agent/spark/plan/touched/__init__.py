"""What a SQL execution touches: `read.read_plan` walks its `sparkPlanInfo` tree into the
datasets it reads (`scans`) and writes (`writes`), with the column lineage of its writes
(`lineage`), each node read with what the plan description tells of it (`reading`); RDD
jobs outside SQL (`rdds`). The top of plan analysis: may import every other
part of `plan`, nothing else from the Spark side."""
