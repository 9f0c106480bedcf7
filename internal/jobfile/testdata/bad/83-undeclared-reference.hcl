variable "region" {
  default = "eu"
}

job "web" {
  datacenters = ["${var.regoin}-1"]
  group "api" {
    count = local.count
    task "server" {
      driver = "exec"
      config {
        command = "/bin/echo"
        args    = ["${NOMAD_ALLOC_ID}", "${version}", upper(var.region), nosuchfunc("x")]
      }
    }
  }
}
