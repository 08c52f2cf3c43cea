package main

import "github.com/urfave/cli/v2"

// placeholder until the runc stage lands
var runcCommand = &cli.Command{Name: "runc"}
