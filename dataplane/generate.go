package dataplane

//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type svc_key -type svc_value -type backend_key -type backend_value -type sock_nat -type svc_name -type maglev_key sock ../bpf/sock.c -- -I../bpf/lib
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type ct_key -type ct_value nodeport ../bpf/tc_nodeport.c -- -I../bpf/lib
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type pol_endpoint -type pol_rule_key -type pol_rule_value -type pol_cidr_key -type pol_flow -type pol_drop_key -type pol_name_key -type pol_name policy ../bpf/tc_policy.c -- -I../bpf/lib
