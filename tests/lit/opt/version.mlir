// RUN: irflow-opt --version | filecheck %s

// CHECK: irflow-opt {{[0-9.]+}} (xDSL 0.74.0)
