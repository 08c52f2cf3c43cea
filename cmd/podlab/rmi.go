package main

import "github.com/urfave/cli/v2"

// placeholder until the rmi stage lands
var rmiCommand = &cli.Command{Name: "rmi"}
