"""How Spark prints things, read: the `explain formatted` plan text (`text`), expressions and
the attributes they reference (`expressions`), schema strings (`schema`), table identifiers
and snake-cased names (`tables`) and the marks of a cut list (`cuts`). The bottom of plan
analysis: imports nothing else from the Spark side."""
