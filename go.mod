module kernbench

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/cobra v1.10.2
	github.com/x448/float16 v0.8.4
	go.starlark.net v0.0.0-20260908191801-89a6a09411d5
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/sys v0.42.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
