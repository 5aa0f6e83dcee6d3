module glm5rt

go 1.19
