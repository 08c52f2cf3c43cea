package main

import "github.com/urfave/cli/v2"

// placeholder until the spec stage lands
var specCommand = &cli.Command{Name: "spec"}
