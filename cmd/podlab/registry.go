package main

import "github.com/urfave/cli/v2"

// placeholder until the registry stage lands
var registryCommand = &cli.Command{Name: "registry"}
