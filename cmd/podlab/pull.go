package main

import "github.com/urfave/cli/v2"

// placeholder until the pull stage lands
var pullCommand = &cli.Command{Name: "pull"}
