package main

import "github.com/urfave/cli/v2"

// placeholder until the inspect stage lands
var inspectCommand = &cli.Command{Name: "inspect"}
