# A list nested 70 deep: drover refuses what nests past 64 levels
# before parsing it (deep enough, it overflowed the parser's stack).
job "web" {
  group "api" {
    task "server" {
      driver = "exec"
      config {
        command = "/bin/server"
        args    = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
      }
    }
  }
}
