locals {
  a = "${local.b}-x"
  b = "${local.a}-y"
  c = "fine"
}

locals {
  c = "again"
}

job "web" {
  meta = { a = local.a, c = local.c }
  group "api" {
    task "server" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
