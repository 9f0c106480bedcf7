job "one" {
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}

job "two" {
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
