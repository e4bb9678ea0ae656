/* The floor of the RPC round-trip benchmark: a TCP server on 127.0.0.1 that accepts one
 * connection and answers every packet it receives with 40 bytes, doing no other work (no RPC
 * decoding, no function call). benches/rpc_bench.py drives it with the same client loop and
 * the same call packets as the real servers, so its round trip is the part of theirs that the
 * kernel's loopback path and the client take; no server can go below it.
 *
 *   rpc_echo PORT      (exits when the client closes the connection)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: rpc_echo PORT\n");
    return 2;
  }
  int one = 1;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[1]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, (struct sockaddr*)&a, sizeof a) != 0 || listen(ls, 1) != 0) {
    perror("rpc_echo: bind/listen");
    return 1;
  }
  printf("listening\n");
  fflush(stdout);
  int c = accept(ls, NULL, NULL);
  if (c < 0) {
    perror("rpc_echo: accept");
    return 1;
  }
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char buf[4096];
  char reply[40];
  memset(reply, 0, sizeof reply);
  for (;;) {
    ssize_t n = recv(c, buf, sizeof buf, 0);
    if (n <= 0) break;
    if (send(c, reply, sizeof reply, 0) != (ssize_t)sizeof reply) break;
  }
  close(c);
  close(ls);
  return 0;
}
