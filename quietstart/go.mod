module early.kernbench/quietstart

go 1.26.8
